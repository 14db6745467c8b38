"""Certified tails of loops that end on a measurement: what the cut-off sum leaves out,
bounded from the loop's memory (its light cone), its output growth and gate sensitivities."""
