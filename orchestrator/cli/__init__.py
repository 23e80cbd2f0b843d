"""The ``nexo`` command line. Each command family lives in its own module, imported on use."""
