"""Two rewrites of the embedding model's graph: int8 weights stay int8 once ONNX Runtime loads them.

The model stores its weights as int8 with one float scale per row (the embedding tables) or per
column (the matrices of its six layers), and turns each whole weight into float32 (Cast, then Mul
by the scales) before using it. ONNX Runtime folds those constant chains once at load, so the
session would hold a float32 copy of every weight, four times its int8 size. Rewritten:

- Tables. The Gather of each table picks the int8 rows and their scales, and only those rows are
  cast and scaled, on every run: each value is computed by the same two float operations as
  before, so the result is the same to the bit. The vocabulary's table alone would have been a
  47 MB float32 copy, of which a query reads a few dozen rows.
- Matrices. Each MatMul by a scaled int8 matrix becomes ONNX Runtime's DynamicQuantizeMatMul over
  the int8 matrix and its column scales: the activations are quantised to 8 bits per run (one
  scale and zero point for the whole input, from its range) and multiplied in integers. That is
  not the same to the bit: a sentence's vector stays within a cosine of about 0.98 of the float
  graph's (0.99 at the median), and recall finds the same memories (docs/memory.md), for half
  the CPU of a float multiplication and no float copy of the matrices.

The rewrite works on the protobuf wire format (`protobuf_wire`): the graph's nodes are read and
some of them replaced, everything else (the weights above all) is copied as it was. It runs on
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
    encode_varint,
    fields,
    packed_varints,
)

# Field numbers of onnx.proto.
_MODEL_GRAPH, _MODEL_OPSET_IMPORT = 7, 8
_OPSET_DOMAIN, _OPSET_VERSION = 1, 2
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_INPUT, _GRAPH_OUTPUT = 1, 5, 11, 12
_NODE_INPUT, _NODE_OUTPUT, _NODE_NAME, _NODE_OP_TYPE, _NODE_ATTRIBUTE, _NODE_DOMAIN = 1, 2, 3, 4, 5, 7
_ATTRIBUTE_NAME, _ATTRIBUTE_INT = 1, 3
_TENSOR_DIMS, _TENSOR_DATA_TYPE, _TENSOR_NAME = 1, 2, 8
_VALUE_INFO_NAME = 1
_FLOAT, _UINT8, _INT8 = 1, 2, 3
_DEFAULT_DOMAINS = ("", "ai.onnx")
_MICROSOFT = "com.microsoft"
"""The domain of ONNX Runtime's own operators, DynamicQuantizeMatMul among them (version 1)."""


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
class _Dequantized:
    """``Mul(Cast(weight), scale)``: a 2-D int8 initializer turned into float32 by the graph."""

    mul: int
    cast: int
    """Indices of the two nodes, which a rewrite removes."""
    cast_attributes: list[Field]
    weight: _Tensor
    scale: _Tensor


@dataclass(frozen=True, slots=True)
class RewrittenModel:
    model: bytes
    gathered_tables: tuple[str, ...]
    """The int8 initializers whose rows are now looked up before scaling, in graph order."""
    integer_matrices: tuple[str, ...] = ()
    """The int8 initializers now multiplied by DynamicQuantizeMatMul, in graph order."""


def rewrite_model(model: bytes, *, integer_matmuls: bool = True) -> RewrittenModel:
    """``model`` with its int8 weights used as int8 (see the module docstring).

    With ``integer_matmuls`` false only the tables are rewritten, and the vectors are the same to
    the bit as those of the graph as it ships.
    """
    try:
        return _rewrite(memoryview(model), integer_matmuls)
    except (WireError, UnicodeDecodeError) as exc:
        raise ModelGraphError(f"the embedding model is not a readable ONNX file: {exc}") from None


@dataclass(frozen=True, slots=True)
class _Graph:
    nodes: list[_Node]
    initializers: dict[str, _Tensor]
    producers: dict[str, int]
    uses: Counter[str]


def _rewrite(model: memoryview, integer_matmuls: bool) -> RewrittenModel:
    top = list(fields(model))
    graphs = [field for field in top if field.number == _MODEL_GRAPH]
    if len(graphs) != 1:
        raise ModelGraphError(f"the embedding model has {len(graphs)} graphs, expected one")
    graph = list(fields(graphs[0].value))
    nodes = [_Node.parse(field.value) for field in graph if field.number == _GRAPH_NODE]
    tensors = [_Tensor.parse(field.value) for field in graph if field.number == _GRAPH_INITIALIZER]
    boundary = [_value_name(field) for field in graph if field.number in (_GRAPH_INPUT, _GRAPH_OUTPUT)]
    found = _Graph(
        nodes,
        {tensor.name: tensor for tensor in tensors},
        {output: index for index, node in enumerate(nodes) for output in node.outputs},
        Counter(name for node in nodes for name in node.inputs) + Counter(boundary),
    )
    taken = set(found.producers) | set(found.initializers) | set(boundary)
    replaced: dict[int, list[bytes]] = {}
    removed: set[int] = set()
    gathered: list[str] = []
    multiplied: list[str] = []
    for index, node in enumerate(nodes):
        if (table := _scaled_table(node, found)) is not None:
            replaced[index] = _gather_then_scale(node, table, taken)
            gathered.append(table.weight.name)
            removed.update((table.mul, table.cast))
        elif integer_matmuls and (matrix := _scaled_matrix(node, found)) is not None:
            replaced[index] = [_integer_matmul(node, matrix)]
            multiplied.append(matrix.weight.name)
            removed.update((matrix.mul, matrix.cast))
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
    chunks = [
        chunk
        for field in top
        for chunk in ([graph_key, *new_graph] if field.number == _MODEL_GRAPH else [field.raw])
    ]
    if multiplied and _MICROSOFT not in _imported_domains(top):
        chunks.append(_opset_import(_MICROSOFT, 1))
    return RewrittenModel(b"".join(chunks), tuple(gathered), tuple(multiplied))


def _value_name(field: Field) -> str:
    return next((f.text() for f in fields(field.value) if f.number == _VALUE_INFO_NAME), "")


def _imported_domains(top: list[Field]) -> set[str]:
    domains: set[str] = set()
    for field in top:
        if field.number == _MODEL_OPSET_IMPORT:
            domains.update(f.text() for f in fields(field.value) if f.number == _OPSET_DOMAIN)
    return domains


def _opset_import(domain: str, version: int) -> bytes:
    entry = encode_bytes(_OPSET_DOMAIN, domain.encode())
    entry += encode_varint(_OPSET_VERSION << 3) + encode_varint(version)
    return encode_bytes(_MODEL_OPSET_IMPORT, entry)


def _dequantized(name: str, graph: _Graph) -> _Dequantized | None:
    """How ``name`` is computed, if it is a scaled 2-D int8 initializer used by one node only."""
    if graph.uses[name] != 1 or name not in graph.producers:
        return None
    mul_index = graph.producers[name]
    mul = graph.nodes[mul_index]
    if not mul.is_op("Mul") or len(mul.inputs) != 2:
        return None
    for cast_output, scale_name in (mul.inputs, mul.inputs[::-1]):
        if cast_output not in graph.producers or graph.uses[cast_output] != 1:
            continue
        scale = graph.initializers.get(scale_name)
        cast_index = graph.producers[cast_output]
        cast = graph.nodes[cast_index]
        weight = graph.initializers.get(cast.inputs[0]) if cast.is_op("Cast") and cast.inputs else None
        if weight is None or scale is None or weight.data_type not in (_INT8, _UINT8):
            continue
        if len(weight.dims) == 2 and scale.data_type == _FLOAT and cast.int_attribute("to", 0) == _FLOAT:
            return _Dequantized(mul_index, cast_index, cast.attributes, weight, scale)
    return None


def _scaled_table(gather: _Node, graph: _Graph) -> _Dequantized | None:
    """The table of a Gather over a scaled int8 table with one scale per row."""
    if not gather.is_op("Gather") or len(gather.inputs) != 2 or gather.int_attribute("axis", 0) != 0:
        return None
    table = _dequantized(gather.inputs[0], graph)
    if table is None or table.scale.dims != (table.weight.dims[0], 1):
        return None
    return table


def _scaled_matrix(matmul: _Node, graph: _Graph) -> _Dequantized | None:
    """The right-hand side of a MatMul by a scaled int8 matrix with one scale per column."""
    if not matmul.is_op("MatMul") or len(matmul.inputs) != 2 or matmul.inputs[0] in graph.initializers:
        return None
    matrix = _dequantized(matmul.inputs[1], graph)
    if matrix is None or matrix.weight.data_type != _INT8:
        return None
    columns = matrix.weight.dims[1]
    return matrix if matrix.scale.dims in ((1, columns), (columns,)) else None


def _gather_then_scale(gather: _Node, table: _Dequantized, taken: set[str]) -> list[bytes]:
    """Gather(table) and Gather(scale) by the same indices, then Cast and Mul: the original output."""
    output = gather.outputs[0]
    indices = gather.inputs[1]
    rows, rows_float, row_scales = (
        _fresh(f"{output}/{suffix}", taken) for suffix in ("int8_rows", "rows", "row_scales")
    )
    return [
        _encode_node("Gather", [table.weight.name, indices], rows, gather.attributes),
        _encode_node("Gather", [table.scale.name, indices], row_scales, gather.attributes),
        _encode_node("Cast", [rows], rows_float, table.cast_attributes),
        _encode_node("Mul", [rows_float, row_scales], output, []),
    ]


def _integer_matmul(matmul: _Node, matrix: _Dequantized) -> bytes:
    """DynamicQuantizeMatMul(A, int8 matrix, column scales): the original output, from integers."""
    inputs = [matmul.inputs[0], matrix.weight.name, matrix.scale.name]
    return _encode_node("DynamicQuantizeMatMul", inputs, matmul.outputs[0], [], domain=_MICROSOFT)


def _fresh(name: str, taken: set[str]) -> str:
    if name in taken:
        raise ModelGraphError(f"the embedding model already has a value named {name!r}")
    taken.add(name)
    return name


def _encode_node(
    op_type: str, inputs: list[str], output: str, attributes: Iterable[Field], *, domain: str = ""
) -> bytes:
    parts = [encode_bytes(_NODE_INPUT, name.encode()) for name in inputs]
    parts.append(encode_bytes(_NODE_OUTPUT, output.encode()))
    parts.append(encode_bytes(_NODE_NAME, f"{output}/{op_type}".encode()))
    parts.append(encode_bytes(_NODE_OP_TYPE, op_type.encode()))
    parts.extend(bytes(attribute.raw) for attribute in attributes)
    if domain:
        parts.append(encode_bytes(_NODE_DOMAIN, domain.encode()))
    return b"".join(parts)
