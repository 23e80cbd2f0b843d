"""The wire contract of the audit server: ledger entries, goals, and its control-plane methods.

Every method is a custom JSON-RPC request (``nexo/audit/...``), not a tool, so none of them reaches
any model's tool list. Each entry kind has a body model; build drafts from them with
``EntryDraft.of(body, ...)``. The server validates every draft again and names what is wrong.

- :mod:`~shared.protocol.audit.terms`: the vocabulary and limits (entry kinds, goal statuses, error
  codes), importing no pydantic;
- :mod:`~shared.protocol.audit.digest`: canonical JSON and the digest of a tool call's arguments;
- :mod:`~shared.protocol.audit.bodies`: one body model per entry kind;
- :mod:`~shared.protocol.audit.entries`: drafts, entries, the chain's head and its verification;
- :mod:`~shared.protocol.audit.goals`: the goal registry's goal, origin and budget;
- :mod:`~shared.protocol.audit.methods`: the control-plane requests, their params and results.
"""
