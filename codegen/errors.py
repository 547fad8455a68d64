"""The generator's one error type: a failure already worded for the user (which file, row, field or
unit, and what went wrong), so the command line prints it as it is and exits 1."""


class GenError(Exception):
    pass
