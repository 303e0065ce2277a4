"""A workflow: operators as nodes of a `networkx.DiGraph`, validated, then compiled to iterators.

Node attributes: `op` (the operator's name), `params` (its settings) and
`operator` (the instance). Edge attributes: `kind` (what flows: batch,
results, ...; the records are in `marl.data.records`), `may_skip`
(whether SKIP can flow on it) and `index` (which input of the consumer it
feeds). The YAML form lists nodes with the nodes they come `after`:

    nodes:
      sample: {op: sample, mode: sync}
      concat: {op: concat, min_env_steps: 4000, after: sample}
"""

from __future__ import annotations

import copy

import networkx as nx

from marl.data.records import ANY, RECORD_TYPES, REPORT, SKIP, copy_record
from marl.execution import LocalIterator
from marl.workflow.protocol import ExecutionContext, Operator, operator_param_names
from marl.workflow.table import OPERATORS


class WorkflowError(ValueError):
    """A workflow that cannot run; the message names the node or edge."""


def _after_list(after) -> list[str]:
    if after is None:
        return []
    if isinstance(after, str):
        return [after]
    return [str(a) for a in after]


class Workflow:
    def __init__(self, name: str = "workflow"):
        self.name = name
        self.graph = nx.DiGraph(name=name)

    # -- building -------------------------------------------------------------
    def add(self, name: str, operator: Operator, after: str | list[str] | None = None) -> "Workflow":
        """Adds node `name` running `operator`, fed by the nodes in `after` (in input order)."""
        if not isinstance(operator, Operator):
            raise WorkflowError(f"node '{name}': {operator!r} is not an Operator")
        if name in self.graph and "operator" in self.graph.nodes[name]:
            raise WorkflowError(f"node '{name}' is defined twice")
        self.graph.add_node(name, op=operator.op_name, params=operator.params(), operator=operator)
        for index, upstream in enumerate(_after_list(after)):
            self.graph.add_edge(upstream, name, index=index)
        return self

    def copy(self) -> "Workflow":
        """A graph of its own, each node with its own operator (a shallow copy: `build` gives each its state)."""
        out = Workflow(self.name)
        out.graph = self.graph.copy()
        for _, data in out.graph.nodes(data=True):
            if "operator" in data:
                data["operator"] = copy.copy(data["operator"])
        return out

    def add_input(self, node: str, upstream: str) -> "Workflow":
        """Feeds `upstream` into `node` as its next input (e.g. an `evaluate` node into the report)."""
        self.graph.add_edge(upstream, node, index=self.graph.in_degree(node))
        return self

    def report_node(self) -> str:
        """The name of the (validated, single) report node."""
        return next(n for n in self.graph if self.graph.nodes[n].get("op") == "report")

    @classmethod
    def from_dict(cls, spec, name: str = "workflow") -> "Workflow":
        """The YAML form: {nodes: {name: {op: ..., after: ..., **params}}}."""
        if not isinstance(spec, dict) or set(spec) - {"nodes", "name"} or "nodes" not in spec:
            keys = sorted(spec) if isinstance(spec, dict) else type(spec).__name__
            raise WorkflowError(f"'workflow' must be a mapping with a 'nodes' table (and optional 'name'), got {keys}")
        nodes = spec["nodes"]
        if not isinstance(nodes, dict) or not nodes:
            raise WorkflowError("'workflow.nodes' must be a non-empty table: node name -> {op: ..., after: ...}")
        wf = cls(spec.get("name", name))
        for node, body in nodes.items():
            if not isinstance(body, dict) or "op" not in body:
                raise WorkflowError(f"workflow node '{node}' needs an 'op' key naming its operator, got {body!r}")
            params = {k: v for k, v in body.items() if k not in ("op", "after")}
            wf.add(str(node), make_operator(str(node), body["op"], params), after=body.get("after"))
        return wf

    def to_dict(self) -> dict:
        nodes = {}
        for node in nx.topological_sort(self.graph) if nx.is_directed_acyclic_graph(self.graph) else self.graph:
            data = self.graph.nodes[node]
            entry = {"op": data.get("op")}
            entry.update(data.get("params", {}))
            ups = sorted(self.graph.predecessors(node), key=lambda u: self.graph.edges[u, node]["index"])
            if ups:
                entry["after"] = ups[0] if len(ups) == 1 else ups
            nodes[node] = entry
        return {"name": self.name, "nodes": nodes}

    # -- checking -------------------------------------------------------------
    def validate(self) -> "Workflow":
        g = self.graph
        if g.number_of_nodes() == 0:
            raise WorkflowError("the workflow has no nodes")
        for node, data in g.nodes(data=True):
            if "operator" not in data:
                users = sorted(g.successors(node))
                raise WorkflowError(f"node(s) {users} come after '{node}', which is not defined")
        try:
            cycle = nx.find_cycle(g)
        except nx.NetworkXNoCycle:
            cycle = None
        if cycle:
            path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
            raise WorkflowError(f"the workflow has a cycle: {path}; a workflow must be acyclic")
        for node in nx.topological_sort(g):  # upstream first: an edge's may_skip depends on its producer's inputs
            op: Operator = g.nodes[node]["operator"]
            ins = sorted(g.in_edges(node, data=True), key=lambda e: e[2]["index"])
            required = len(op.consumes) - op.optional_inputs
            if not op.consumes and ins:
                raise WorkflowError(f"node '{node}' (op {op.op_name}) is a source and takes no input, but comes after {[u for u, _, _ in ins]}")
            if op.consumes and not ins:
                raise WorkflowError(f"node '{node}' (op {op.op_name}) needs an input of kind '{op.consumes[0]}': give it 'after'")
            if not op.variadic and op.consumes and not required <= len(ins) <= len(op.consumes):
                count = len(op.consumes) if not op.optional_inputs else f"{required} to {len(op.consumes)}"
                raise WorkflowError(f"node '{node}' (op {op.op_name}) takes {count} input(s), got {len(ins)}")
            for i, (upstream, _, data) in enumerate(ins):
                produced = g.nodes[upstream]["operator"].produces
                wanted = op.consumes[0] if op.variadic else op.consumes[i]
                if produced != wanted and wanted != ANY:
                    raise WorkflowError(
                        f"edge '{upstream}' -> '{node}' carries '{produced}' but '{node}' (op {op.op_name}) "
                        f"consumes '{wanted}'"
                    )
                data["kind"] = produced
                if data["may_skip"] and not op.handles_skip:
                    raise WorkflowError(
                        f"edge '{upstream}' -> '{node}' may carry SKIP (nothing this time, from a node that declares "
                        f"may_skip), but '{node}' (op {op.op_name}) does not declare handles_skip"
                    )
            problem = op.check_inputs([g.nodes[u]["operator"].produces for u, _, _ in ins]) if ins else None
            if problem:
                raise WorkflowError(f"node '{node}' (op {op.op_name}): {problem}")
            skips = op.may_skip or any(data["may_skip"] for _, _, data in ins)
            for _, _, data in g.out_edges(node, data=True):
                data["may_skip"] = skips
        reports = [n for n in g if g.nodes[n]["op"] == "report"]
        if len(reports) != 1:
            raise WorkflowError(f"a workflow needs exactly one 'report' node, found {len(reports)}: {reports}")
        for node in g:
            if g.out_degree(node) == 0 and node != reports[0]:
                raise WorkflowError(f"the output of node '{node}' goes nowhere: every branch must lead to '{reports[0]}'")
        if reports and g.out_degree(reports[0]):
            raise WorkflowError(f"'report' node '{reports[0]}' must be the last node, but feeds {sorted(g.successors(reports[0]))}")
        return self

    # -- running --------------------------------------------------------------
    def compile(self, ctx: ExecutionContext) -> LocalIterator:
        """Builds every operator's iterator in topological order; returns the report node's.

        Each operator's state (`get_state()` not None) goes into `ctx.checkpointables`
        as `workflow/<node>` (the report's totals as `report`). A node feeding k > 1
        nodes gives the first its records and each other one its own copy.
        """
        self.validate()
        g = self.graph
        outputs: dict[str, list[LocalIterator]] = {}
        report = None
        for node in nx.topological_sort(g):
            ups = sorted(g.predecessors(node), key=lambda u: g.edges[u, node]["index"])
            inputs = [outputs[u].pop(0) for u in ups]
            operator = g.nodes[node]["operator"]
            it = _checked(operator.build(ctx, inputs), node, operator, any(d["may_skip"] for _, _, d in g.out_edges(node, data=True)))
            it.name = node
            if operator.get_state() is not None:
                ctx.checkpointables["report" if operator.produces == REPORT else f"workflow/{node}"] = operator
            fan_out = g.out_degree(node)
            outputs[node] = it.duplicate(fan_out, copy_record) if fan_out > 1 else [it]
            if g.nodes[node]["op"] == "report":
                report = it
        return report

    def describe(self) -> str:
        """Operators and edges, one per line (what `marl graph` prints)."""
        g = self.graph
        lines = [f"workflow '{self.name}': {g.number_of_nodes()} operators, {g.number_of_edges()} edges"]
        order = list(nx.topological_sort(g)) if nx.is_directed_acyclic_graph(g) else list(g)
        for node in order:
            params = ", ".join(f"{k}={v}" for k, v in g.nodes[node].get("params", {}).items())
            lines.append(f"  {node}: {g.nodes[node].get('op')}({params})")
        for u, v, data in g.edges(data=True):
            lines.append(f"  {u} --{data.get('kind', '?')}--> {v}" + ("  (may skip)" if data.get("may_skip") else ""))
        return "\n".join(lines)


def _checked(it: LocalIterator, node: str, operator: Operator, may_skip: bool) -> LocalIterator:
    """The node's iterator, checking each item against the node's kind (its record type, SKIP only if declared)."""
    record_type = RECORD_TYPES.get(operator.produces)

    def gen():
        for item in it:
            if item is SKIP:
                if not may_skip:
                    raise WorkflowError(f"node '{node}' (op {operator.op_name}) emitted SKIP, but neither it nor its inputs declare may_skip")
            elif record_type is not None and not isinstance(item, record_type):
                raise WorkflowError(
                    f"node '{node}' (op {operator.op_name}) emitted a {type(item).__name__}; edges of kind "
                    f"'{operator.produces}' carry {record_type.__name__} records (marl.data.records)"
                )
            yield item

    return LocalIterator(gen, it.metrics, node)


def make_operator(node: str, op_name, params: dict) -> Operator:
    cls = OPERATORS.get(op_name)
    if cls is None:
        raise WorkflowError(f"workflow node '{node}': unknown operator '{op_name}'; known operators: {sorted(OPERATORS)}")
    allowed = operator_param_names(cls)
    unknown = [k for k in params if k not in allowed]
    if unknown:
        raise WorkflowError(f"workflow node '{node}' (op {op_name}): unknown parameter(s) {unknown}; allowed: {allowed}")
    try:
        return cls(**params)
    except (TypeError, ValueError) as err:
        raise WorkflowError(f"workflow node '{node}' (op {op_name}): {err}") from None
