"""From result records to paper-ready output: tidy table, comparison tables, figures."""
