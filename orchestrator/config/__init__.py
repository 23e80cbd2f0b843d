"""The orchestrator's configuration: one YAML file, validated strictly, errors with key paths and fixes.

- :mod:`~orchestrator.config.loading`: ``load``, the file (or the built-in defaults) read, expanded
  and checked;
- :mod:`~orchestrator.config.nexo`: ``NexoConfig``, the whole file, with its small sections;
- :mod:`~orchestrator.config.agents`: an agent, its model, budgets, memory and pollers;
- :mod:`~orchestrator.config.channels`: per-channel options, pairing policy and approved channels;
- :mod:`~orchestrator.config.roles`: which configured server keeps audit, cron and pairing;
- :mod:`~orchestrator.config.references`: what one section says about another (names that must
  exist, prices a money budget needs), reported together at load;
- :mod:`~orchestrator.config.strict`: the base of every section, which refuses unknown keys;
- :mod:`~orchestrator.config.preflight`: what the machine must provide, checked at start and by
  ``nexo run --check-config``.
"""
