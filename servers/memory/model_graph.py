"""One rewrite of the embedding model's graph: look up rows of an int8 table before scaling them.

The model stores each embedding table as int8 with one float scale per row, and turns the whole
table into float32 (Cast, then Mul by the scales) before its Gather picks the rows of the tokens.
ONNX Runtime folds that constant chain once at load, so the session would hold a float32 copy of
every table: 47 MB for the 30,522-word vocabulary, four times its int8 size, of which a query reads
a few dozen rows. Rewritten, the Gather picks the int8 rows and their scales, and only those rows
are cast and scaled, on every run: each value is computed by the same two float operations as
before, so the result is the same to the bit.

The rewrite works on the protobuf wire format (`protobuf_wire`): the graph's nodes are read and
three of them replaced, everything else (the weights above all) is copied as it was. It runs on
bytes already checked against the pinned digest, so what ONNX Runtime loads is derived from
verified bytes by this code alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from servers.memory.protobuf_wire import (
    Field,
    WireError,
    encode_bytes,
    encode_length_key,
    fields,
    packed_varints,
)

# Field numbers of onnx.proto.
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_INPUT, _GRAPH_OUTPUT = 1, 5, 11, 12
_NODE_INPUT, _NODE_OUTPUT, _NODE_NAME, _NODE_OP_TYPE, _NODE_ATTRIBUTE, _NODE_DOMAIN = 1, 2, 3, 4, 5, 7
_ATTRIBUTE_NAME, _ATTRIBUTE_INT = 1, 3
_TENSOR_DIMS, _TENSOR_DATA_TYPE, _TENSOR_NAME = 1, 2, 8
_VALUE_INFO_NAME = 1
_FLOAT, _UINT8, _INT8 = 1, 2, 3
_DEFAULT_DOMAINS = ("", "ai.onnx")


class ModelGraphError(ValueError):
    """The model's bytes are not an ONNX graph this module can read."""


@dataclass(frozen=True, slots=True)
class _Node:
    inputs: list[str]
    outputs: list[str]
    op_type: str
    domain: str
    attributes: list[Field]
    """Each one an AttributeProto, kept encoded."""

    @classmethod
    def parse(cls, encoded: memoryview) -> _Node:
        inputs: list[str] = []
        outputs: list[str] = []
        attributes: list[Field] = []
        op_type = domain = ""
        for field in fields(encoded):
            if field.number == _NODE_INPUT:
                inputs.append(field.text())
            elif field.number == _NODE_OUTPUT:
                outputs.append(field.text())
            elif field.number == _NODE_OP_TYPE:
                op_type = field.text()
            elif field.number == _NODE_DOMAIN:
                domain = field.text()
            elif field.number == _NODE_ATTRIBUTE:
                attributes.append(field)
        return cls(inputs, outputs, op_type, domain, attributes)

    def is_op(self, op_type: str) -> bool:
        return self.op_type == op_type and self.domain in _DEFAULT_DOMAINS

    def int_attribute(self, name: str, default: int) -> int:
        for attribute in self.attributes:
            parts = list(fields(attribute.value))
            if any(f.number == _ATTRIBUTE_NAME and f.text() == name for f in parts):
                ints = [f.varint() for f in parts if f.number == _ATTRIBUTE_INT]
                return ints[0] if ints else default
        return default


@dataclass(frozen=True, slots=True)
class _Tensor:
    name: str
    dims: tuple[int, ...]
    data_type: int

    @classmethod
    def parse(cls, encoded: memoryview) -> _Tensor:
        name = ""
        dims: list[int] = []
        data_type = 0
        for field in fields(encoded):
            if field.number == _TENSOR_NAME:
                name = field.text()
            elif field.number == _TENSOR_DIMS:
                dims.extend(packed_varints(field))
            elif field.number == _TENSOR_DATA_TYPE:
                data_type = field.varint()
        return cls(name, tuple(dims), data_type)


@dataclass(frozen=True, slots=True)
class _ScaledTable:
    """A Gather over ``Mul(Cast(table), scale)`` where ``table`` is an int8 initializer."""

    gather: _Node
    cast: _Node
    table: _Tensor
    scale: _Tensor
    """One float per row of the table: shape (rows, 1)."""


@dataclass(frozen=True, slots=True)
class RewrittenModel:
    model: bytes
    gathered_tables: tuple[str, ...]
    """The int8 initializers whose rows are now looked up before scaling, in graph order."""


def gather_rows_before_scaling(model: bytes) -> RewrittenModel:
    """``model`` with each scaled int8 table's lookup done on the int8 rows (see the module docstring)."""
    try:
        return _rewrite(memoryview(model))
    except (WireError, UnicodeDecodeError) as exc:
        raise ModelGraphError(f"the embedding model is not a readable ONNX file: {exc}") from None


def _rewrite(model: memoryview) -> RewrittenModel:
    top = list(fields(model))
    graphs = [field for field in top if field.number == _MODEL_GRAPH]
    if len(graphs) != 1:
        raise ModelGraphError(f"the embedding model has {len(graphs)} graphs, expected one")
    graph = list(fields(graphs[0].value))
    nodes = [_Node.parse(field.value) for field in graph if field.number == _GRAPH_NODE]
    tensors = [_Tensor.parse(field.value) for field in graph if field.number == _GRAPH_INITIALIZER]
    boundary = [_value_name(field) for field in graph if field.number in (_GRAPH_INPUT, _GRAPH_OUTPUT)]
    initializers = {tensor.name: tensor for tensor in tensors}
    producers = {output: index for index, node in enumerate(nodes) for output in node.outputs}
    uses = Counter(name for node in nodes for name in node.inputs) + Counter(boundary)
    taken = set(producers) | set(initializers) | set(boundary)
    replaced: dict[int, list[bytes]] = {}
    removed: set[int] = set()
    gathered: list[str] = []
    for index, node in enumerate(nodes):
        found = _scaled_table(node, nodes, producers, initializers, uses)
        if found is None:
            continue
        mul, cast = producers[node.inputs[0]], producers[found.cast.outputs[0]]
        replaced[index] = _gather_then_scale(found, taken)
        removed.update((mul, cast))
        gathered.append(found.table.name)
    # One copy of the model in all: the chunks are slices of it, joined once at the end.
    new_graph: list[bytes | memoryview] = []
    position = 0
    for field in graph:
        if field.number != _GRAPH_NODE:
            new_graph.append(field.raw)
            continue
        if position in replaced:
            new_graph.extend(encode_bytes(_GRAPH_NODE, node) for node in replaced[position])
        elif position not in removed:
            new_graph.append(field.raw)
        position += 1
    graph_key = encode_length_key(_MODEL_GRAPH, sum(len(chunk) for chunk in new_graph))
    rebuilt = b"".join(
        chunk
        for field in top
        for chunk in ([graph_key, *new_graph] if field.number == _MODEL_GRAPH else [field.raw])
    )
    return RewrittenModel(rebuilt, tuple(gathered))


def _value_name(field: Field) -> str:
    return next((f.text() for f in fields(field.value) if f.number == _VALUE_INFO_NAME), "")


def _scaled_table(
    gather: _Node,
    nodes: list[_Node],
    producers: dict[str, int],
    initializers: dict[str, _Tensor],
    uses: Counter[str],
) -> _ScaledTable | None:
    if not gather.is_op("Gather") or len(gather.inputs) != 2 or gather.int_attribute("axis", 0) != 0:
        return None
    scaled = gather.inputs[0]
    if uses[scaled] != 1 or scaled not in producers:
        return None
    mul = nodes[producers[scaled]]
    if not mul.is_op("Mul") or len(mul.inputs) != 2:
        return None
    for cast_output, scale_name in (mul.inputs, mul.inputs[::-1]):
        if cast_output not in producers or uses[cast_output] != 1 or scale_name not in initializers:
            continue
        cast = nodes[producers[cast_output]]
        table = initializers.get(cast.inputs[0]) if cast.is_op("Cast") and cast.inputs else None
        if table is None or table.data_type not in (_INT8, _UINT8) or len(table.dims) != 2:
            continue
        if cast.int_attribute("to", 0) != _FLOAT:
            continue
        scale = initializers[scale_name]
        if scale.data_type == _FLOAT and scale.dims == (table.dims[0], 1):
            return _ScaledTable(gather, cast, table, scale)
    return None


def _gather_then_scale(found: _ScaledTable, taken: set[str]) -> list[bytes]:
    """Gather(table) and Gather(scale) by the same indices, then Cast and Mul: the original output."""
    output = found.gather.outputs[0]
    indices = found.gather.inputs[1]
    rows, rows_float, row_scales = (
        _fresh(f"{output}/{suffix}", taken) for suffix in ("int8_rows", "rows", "row_scales")
    )
    return [
        _encode_node("Gather", [found.table.name, indices], rows, found.gather.attributes),
        _encode_node("Gather", [found.scale.name, indices], row_scales, found.gather.attributes),
        _encode_node("Cast", [rows], rows_float, found.cast.attributes),
        _encode_node("Mul", [rows_float, row_scales], output, []),
    ]


def _fresh(name: str, taken: set[str]) -> str:
    if name in taken:
        raise ModelGraphError(f"the embedding model already has a value named {name!r}")
    taken.add(name)
    return name


def _encode_node(op_type: str, inputs: list[str], output: str, attributes: Iterable[Field]) -> bytes:
    parts = [encode_bytes(_NODE_INPUT, name.encode()) for name in inputs]
    parts.append(encode_bytes(_NODE_OUTPUT, output.encode()))
    parts.append(encode_bytes(_NODE_NAME, f"{output}/{op_type}".encode()))
    parts.append(encode_bytes(_NODE_OP_TYPE, op_type.encode()))
    parts.extend(bytes(attribute.raw) for attribute in attributes)
    return b"".join(parts)
