//! The only place that renders tables, YAML and JSON for the CLI.
