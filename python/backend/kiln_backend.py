"""kiln's PEP 517 build backend: meson-python's, with each `*-args` setting split into words as a shell
splits them, so that one setting holds several Meson options:

    pip install --no-build-isolation --config-settings=setup-args="-Darchs=sm_80,sm_90 -Dprimitives=true" .

Debian 12's pip (23.0.1) keeps only the last of repeated --config-settings of one key, so the Meson
options of one build have to travel in one value; newer frontends pass a list, whose items are split
alike. Every other setting, and every hook, is meson-python's unchanged."""

import functools
import inspect
import shlex

import mesonpy


def split_args(config_settings):
    """config_settings with each `*-args` value (a string or a list of strings) as a list of words."""
    if not config_settings:
        return config_settings
    settings = dict(config_settings)
    for key, value in config_settings.items():
        if key.endswith("-args"):
            values = [value] if isinstance(value, str) else list(value)
            if not all(isinstance(v, str) for v in values):
                raise TypeError(f"config setting {key!r}: expected strings, got {value!r}")
            settings[key] = [word for v in values for word in shlex.split(v)]
    return settings


def _with_split_args(hook):
    signature = inspect.signature(hook)

    @functools.wraps(hook)
    def wrapped(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)  # frontends pass config_settings by position
        if "config_settings" in bound.arguments:
            bound.arguments["config_settings"] = split_args(bound.arguments["config_settings"])
        return hook(*bound.args, **bound.kwargs)
    return wrapped


_HOOKS = ("build_wheel", "build_sdist", "build_editable", "get_requires_for_build_wheel",
          "get_requires_for_build_sdist", "get_requires_for_build_editable", "prepare_metadata_for_build_wheel",
          "prepare_metadata_for_build_editable")
for _name in _HOOKS:
    if hasattr(mesonpy, _name):
        globals()[_name] = _with_split_args(getattr(mesonpy, _name))
