"""Stores that keep the library's state in a file or a service (L6): :mod:`.sqlite_tasks`, the tasks of the tasks
extension in a SQLite file."""

__all__: tuple[str, ...] = ()
