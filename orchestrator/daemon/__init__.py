"""``nexo run``: the daemon that holds the mesh, an intake per agent and the control socket.

:mod:`~orchestrator.daemon.orchestrator` starts and stops it; :mod:`~orchestrator.daemon.agents`
wires each agent's turns; :mod:`~orchestrator.daemon.pushes` hands pushed messages to the intakes;
:mod:`~orchestrator.daemon.commands` answers the control socket; :mod:`~orchestrator.daemon.status`
reports what runs.
"""
