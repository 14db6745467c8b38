"""The versioned JSON form of programs (never pickle).

Layout (version 1)::

    {"format": "qdiff.program", "version": 1,
     "program": {"name": ..., "inputs": [type, ...],
                 "eqns": [{"primitive": "add", "inputs": [ref, ...],
                           "outputs": [type, ...], "params": {...}}, ...],
                 "outputs": [ref, ...], "in_tree": ..., "out_tree": ...}}

Vars are numbered by definition order inside each (sub-)program: inputs first, then equation
outputs; a ref is that number, or ``{"literal": array}``. Params encode tuples, arrays,
types and sub-programs with one-key tagged objects.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from . import pytree
from .core import Eqn, Literal, Program, Var
from .errors import QdiffError, SerializationError, VerificationError
from .primitives import get_primitive
from .types import Tensor, Type
from .verifier import verify

FORMAT = "qdiff.program"
VERSION = 1


def program_to_json(program: Program, indent: int | None = None) -> str:
    """Serialize ``program`` to JSON text."""
    document = {"format": FORMAT, "version": VERSION, "program": program_to_data(program)}
    return json.dumps(document, indent=indent, allow_nan=False)


def program_from_json(text: str) -> Program:
    """Read a program from JSON text, checking format, version, primitives and references."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SerializationError(f"not a JSON document: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise SerializationError(f"not a qdiff program (expected \"format\": \"{FORMAT}\")")
    version = document.get("version")
    if version != VERSION:
        raise SerializationError(
            f"unsupported qdiff program format version {version!r}; this qdiff reads "
            f"version {VERSION}")
    program = program_from_data(document["program"], "program")
    try:
        verify(program)
    except VerificationError as exc:
        raise SerializationError(f"the saved program is invalid: {exc}") from None
    return program


def _to_json(self: Program, indent: int | None = None) -> str:
    """The program in qdiff's versioned JSON format."""
    return program_to_json(self, indent=indent)


def _structurally_equal(self: Program, other: object) -> bool:
    # Structural (alpha-)equality: same primitives, params, types and literal values,
    # with vars matched by position rather than identity.
    if not isinstance(other, Program):
        return NotImplemented
    return program_to_data(self) == program_to_data(other)


Program.to_json = _to_json  # type: ignore[attr-defined]
Program.from_json = staticmethod(program_from_json)  # type: ignore[attr-defined]
Program.__eq__ = _structurally_equal  # type: ignore[method-assign,assignment]


def program_to_data(program: Program) -> dict:
    """The JSON data of one (sub-)program; also the basis of structural equality."""
    numbers: dict[Var, int] = {}

    def number(var: Var) -> int:
        numbers[var] = len(numbers)
        return numbers[var]

    def ref(atom: Any) -> Any:
        if isinstance(atom, Literal):
            return {"literal": encode_array(atom.value)}
        return numbers[atom] if atom in numbers else -1

    inputs = []
    for var in program.inputs:
        number(var)
        inputs.append(var.type.to_json())
    eqns = []
    for eqn in program.eqns:
        entry = {
            "primitive": eqn.primitive.name,
            "inputs": [ref(a) for a in eqn.inputs],
            "params": {k: encode_param(v) for k, v in eqn.params.items()},
        }
        for var in eqn.outputs:
            number(var)
        entry["outputs"] = [var.type.to_json() for var in eqn.outputs]
        eqns.append(entry)
    data = {
        "name": program.name,
        "inputs": inputs,
        "eqns": eqns,
        "outputs": [ref(a) for a in program.outputs],
    }
    if program.in_tree is not None:
        data["in_tree"] = pytree.treedef_to_json(program.in_tree)
    if program.out_tree is not None:
        data["out_tree"] = pytree.treedef_to_json(program.out_tree)
    return data


def program_from_data(data: dict, where: str) -> Program:
    try:
        return _program_from_data(data, where)
    except SerializationError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise SerializationError(f"{where}: malformed program data ({exc!r})") from None


def _program_from_data(data: dict, where: str) -> Program:
    where = f"{where} {data.get('name', '?')!r}"
    vars_: list[Var] = []

    def new_var(type_data: dict) -> Var:
        var = Var(Type.from_json(type_data))
        vars_.append(var)
        return var

    def atom(ref: Any, site: str) -> Any:
        if isinstance(ref, dict) and "literal" in ref:
            return Literal(decode_array(ref["literal"]))
        if not isinstance(ref, int) or not 0 <= ref < len(vars_):
            raise SerializationError(
                f"{where}: {site} refers to var {ref!r}, which is not defined at that point "
                f"({len(vars_)} vars are defined there)")
        return vars_[ref]

    inputs = [new_var(t) for t in data["inputs"]]
    eqns = []
    for index, entry in enumerate(data["eqns"]):
        name = entry["primitive"]
        site = f"eqn {index} ({name})"
        try:
            primitive = get_primitive(name)
        except QdiffError as exc:
            raise SerializationError(
                f"{where}: {site}: {exc}; the file may come from a newer qdiff or use a "
                "primitive from a module that is not imported") from None
        eqn_inputs = [atom(r, f"{site} input {k}") for k, r in enumerate(entry["inputs"])]
        params = {k: decode_param(v, f"{where} > {site}") for k, v in entry["params"].items()}
        outputs = [new_var(t) for t in entry["outputs"]]
        eqns.append(Eqn(primitive, tuple(eqn_inputs), tuple(outputs), params))
    outputs = [atom(r, f"output {k}") for k, r in enumerate(data["outputs"])]
    in_tree = pytree.treedef_from_json(data["in_tree"]) if "in_tree" in data else None
    out_tree = pytree.treedef_from_json(data["out_tree"]) if "out_tree" in data else None
    return Program(tuple(inputs), tuple(eqns), tuple(outputs), name=data["name"],
                   in_tree=in_tree, out_tree=out_tree)


def encode_param(value: Any) -> Any:
    """Param value -> JSON data (tagged objects for tuples, arrays, types, programs)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _encode_float(float(value))
    if isinstance(value, complex):
        return {"complex": [_encode_float(value.real), _encode_float(value.imag)]}
    if isinstance(value, tuple):
        return {"tuple": [encode_param(v) for v in value]}
    if isinstance(value, list):
        return [encode_param(v) for v in value]
    if isinstance(value, dict):
        return {"dict": {str(k): encode_param(v) for k, v in sorted(value.items())}}
    if isinstance(value, np.ndarray):
        return {"array": encode_array(value)}
    if isinstance(value, Program):
        return {"program": program_to_data(value)}
    if isinstance(value, Type):
        return {"type": value.to_json()}
    raise SerializationError(f"cannot serialize a param of type {type(value).__name__}")


def decode_param(data: Any, where: str) -> Any:
    if data is None or isinstance(data, (bool, str, int, float)):
        return data
    if isinstance(data, list):
        return [decode_param(v, where) for v in data]
    if isinstance(data, dict) and len(data) == 1:
        (tag, body), = data.items()
        if tag == "tuple":
            return tuple(decode_param(v, where) for v in body)
        if tag == "dict":
            return {k: decode_param(v, where) for k, v in body.items()}
        if tag == "float":
            return _decode_float(data)
        if tag == "complex":
            return complex(_decode_float(body[0]), _decode_float(body[1]))
        if tag == "array":
            return decode_array(body)
        if tag == "program":
            return program_from_data(body, f"{where} > sub-program")
        if tag == "type":
            return Type.from_json(body)
    raise SerializationError(f"{where}: cannot decode param {data!r}")


def _encode_float(x: float) -> Any:
    return x if math.isfinite(x) else {"float": repr(x)}


def _decode_float(data: Any) -> float:
    if isinstance(data, dict):
        return float(data["float"])
    return float(data)


def encode_array(array: np.ndarray) -> dict:
    """An array as {"dtype", "shape", "data"}; complex entries as [re, im] pairs."""
    array = np.asarray(array)
    flat = array.reshape(-1)
    if np.iscomplexobj(flat):
        data = [[_encode_float(z.real), _encode_float(z.imag)] for z in flat.tolist()]
    elif np.issubdtype(flat.dtype, np.floating):
        data = [_encode_float(x) for x in flat.tolist()]
    else:
        data = flat.tolist()
    return {"dtype": Tensor((), array.dtype).dtype, "shape": list(array.shape), "data": data}


def decode_array(data: dict) -> np.ndarray:
    dtype = np.dtype(data["dtype"])
    if np.issubdtype(dtype, np.complexfloating):
        values = [complex(_decode_float(re), _decode_float(im)) for re, im in data["data"]]
    elif np.issubdtype(dtype, np.floating):
        values = [_decode_float(x) for x in data["data"]]
    else:
        values = data["data"]
    return np.array(values, dtype=dtype).reshape(data["shape"])
