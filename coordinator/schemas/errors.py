"""Errors of the schema registry's model: a schema that does not parse."""


class InvalidSchema(ValueError):
    """The schema text is not a valid schema of its type (Confluent's 42201)."""
