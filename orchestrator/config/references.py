"""What one section says about another: names that must exist, what a money budget needs."""

from __future__ import annotations

from orchestrator.config.agents import NAME_PATTERN, AgentConfig
from orchestrator.config.nexo import NexoConfig
from orchestrator.proactive import find_price
from shared.settings import ConfigProblem


def _price_problems(config: NexoConfig, agent: AgentConfig, where: str, file: str) -> list[ConfigProblem]:
    """A usd budget needs the price of every agent's model: without it unattended work stops."""
    money = [name for name, budget in config.autonomy.budgets.items() if budget.usd is not None]
    provider = config.llm.providers.get(agent.model.provider)
    if not money or provider is None:
        return []
    model = f"{agent.model.provider}/{provider.model}"
    if find_price(config.autonomy.prices, model) is not None:
        return []
    return [
        ConfigProblem(
            file,
            f"autonomy.prices.{provider.model}",
            f"autonomy.budgets.{money[0]}.usd is set but {where} ({agent.id}) uses model {provider.model!r} "
            f"of provider {agent.model.provider!r}, which has no price, so its unattended work could not run",
            f"add autonomy.prices[{provider.model!r}] (or {model!r}) with input_per_mtok and "
            "output_per_mtok (USD per million tokens), or remove the usd budget",
        )
    ]


def _autonomy_problems(config: NexoConfig, agent: AgentConfig, where: str, file: str) -> list[ConfigProblem]:
    problems: list[ConfigProblem] = _price_problems(config, agent, where, file)
    acts_alone = agent.heartbeat.enabled or agent.proactive.enabled or bool(agent.pollers)
    dangerous = agent.permissions.dangerous_mode or any(b.dangerous_mode for b in agent.bindings.values())
    if dangerous and acts_alone and config.autonomy.enabled and not agent.confirm_dangerous_autonomy:
        problems.append(
            ConfigProblem(
                file,
                f"{where}.confirm_dangerous_autonomy",
                "dangerous_mode together with autonomous work (heartbeat, proactive or pollers) needs "
                "a second, explicit confirmation",
                f"set {where}.confirm_dangerous_autonomy: true if you mean it, or turn one of them off",
            )
        )
    for channel in agent.bindings:
        if channel not in agent.channels:
            problems.append(
                ConfigProblem(
                    file,
                    f"{where}.bindings.{channel}",
                    f"a binding policy for {channel!r}, which is not one of this agent's channels",
                    f"add {channel!r} to {where}.channels or remove the binding",
                )
            )
    for k, poller in enumerate(agent.pollers):
        if config.cron.server not in config.servers:
            problems.append(
                ConfigProblem(
                    file,
                    f"{where}.pollers[{k}]",
                    f"pollers need the cron server {config.cron.server!r}, which is not configured",
                    "add servers.cron (args: [-m, servers.cron]) or remove the pollers",
                )
            )
            break
        if poller.channel is not None and poller.channel not in config.servers:
            problems.append(
                ConfigProblem(
                    file,
                    f"{where}.pollers[{k}].channel",
                    f"no server named {poller.channel!r}",
                    f"use one of: {', '.join(sorted(config.servers))}",
                )
            )
    return problems


def reference_problems(config: NexoConfig, file: str) -> list[ConfigProblem]:
    """Every name one section gives that another must define, and what autonomy settings require."""
    problems: list[ConfigProblem] = []
    import re

    for name in config.servers:
        if not re.match(NAME_PATTERN, name) or "__" in name:
            problems.append(
                ConfigProblem(
                    file,
                    f"servers.{name}",
                    f"server name {name!r} is not allowed",
                    "use lower-case letters, digits, '-' or '_' (no '__'), starting with a letter",
                )
            )
    providers = sorted(config.llm.providers)
    seen: set[str] = set()
    for i, agent in enumerate(config.agents):
        if agent.id in seen:
            problems.append(
                ConfigProblem(
                    file, f"agents[{i}].id", f"duplicate agent id {agent.id!r}", "give each agent its own id"
                )
            )
        seen.add(agent.id)
        if agent.model.provider not in config.llm.providers:
            problems.append(
                ConfigProblem(
                    file,
                    f"agents[{i}].model.provider",
                    f"no provider named {agent.model.provider!r}",
                    f"use one of: {', '.join(providers) or '(none defined)'}, or add it under llm.providers",
                )
            )
        if agent.memory.extract and agent.memory.server not in config.servers:
            problems.append(
                ConfigProblem(
                    file,
                    f"agents[{i}].memory.extract",
                    f"extraction needs the memory server {agent.memory.server!r}, which is not configured",
                    "add the memory server under servers: or set extract: false",
                )
            )
        problems.extend(_autonomy_problems(config, agent, f"agents[{i}]", file))
        for j, channel in enumerate(agent.channels):
            if channel not in config.servers:
                problems.append(
                    ConfigProblem(
                        file,
                        f"agents[{i}].channels[{j}]",
                        f"no server named {channel!r}",
                        f"add it under servers: or use one of: {', '.join(sorted(config.servers))}",
                    )
                )
    for i, entry in enumerate(config.channels.approved):
        if entry.server not in config.servers:
            problems.append(
                ConfigProblem(
                    file,
                    f"channels.approved[{i}].server",
                    f"no server named {entry.server!r}",
                    f"use one of: {', '.join(sorted(config.servers))}, or add the server",
                )
            )
    for name in config.channel_options:
        if name not in config.servers:
            problems.append(
                ConfigProblem(
                    file,
                    f"channel_options.{name}",
                    f"no server named {name!r}",
                    "remove it or add the server",
                )
            )
    return problems
