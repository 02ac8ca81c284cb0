"""The record: its schema, how it is made, validated, written and read."""
