"""The registry's refusals, each with Confluent's error code (the REST layer answers it with the HTTP status
its first three digits name, 409 as itself)."""

from __future__ import annotations


class RegistryError(Exception):
    error_code = 50001

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SubjectNotFound(RegistryError):
    error_code = 40401

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' not found.")


class VersionNotFound(RegistryError):
    error_code = 40402

    def __init__(self, version: object) -> None:
        super().__init__(f"Version {version} not found.")


class SchemaNotFound(RegistryError):
    error_code = 40403

    def __init__(self, message: str = "Schema not found") -> None:
        super().__init__(message)


class SubjectSoftDeleted(RegistryError):
    error_code = 40404

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


class SubjectNotSoftDeleted(RegistryError):
    error_code = 40405

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' was not deleted first before being permanently deleted")


class VersionSoftDeleted(RegistryError):
    error_code = 40406

    def __init__(self, subject: str, version: int) -> None:
        super().__init__(f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to delete "
                         "permanently")


class VersionNotSoftDeleted(RegistryError):
    error_code = 40407

    def __init__(self, subject: str, version: int) -> None:
        super().__init__(f"Subject '{subject}' Version {version} was not deleted first before being permanently "
                         "deleted")


class SubjectConfigNotFound(RegistryError):
    error_code = 40408

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' does not have subject-level compatibility configured")


class SubjectModeNotFound(RegistryError):
    error_code = 40409

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' does not have subject-level mode configured")


class IncompatibleSchema(RegistryError):
    error_code = 409

    def __init__(self, subject: str, messages: list[str]) -> None:
        super().__init__(f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
                         f"details: [{', '.join(messages)}]")
        self.messages = messages


class InvalidSchemaError(RegistryError):
    """42201: a schema that does not parse, a reference that does not resolve, an unknown schemaType."""

    error_code = 42201


class InvalidVersion(RegistryError):
    error_code = 42202

    def __init__(self, version: object) -> None:
        super().__init__(f"The specified version '{version}' is not a valid version id. Allowed values are between "
                         "[1, 2^31-1] and the string \"latest\"")


class InvalidCompatibilityLevel(RegistryError):
    error_code = 42203

    def __init__(self, level: object) -> None:
        super().__init__(f"Invalid compatibility level. Valid values are none, backward, forward, full, "
                         f"backward_transitive, forward_transitive, and full_transitive (got {level!r})")


class InvalidMode(RegistryError):
    error_code = 42204

    def __init__(self, mode: object) -> None:
        super().__init__(f"Invalid mode. Valid values are READWRITE, READONLY, IMPORT (got {mode!r})")


class OperationNotPermitted(RegistryError):
    error_code = 42205


class ReferenceExists(RegistryError):
    error_code = 42206
