"""Run configuration: the schema, loading (TOML files, defaults, ``--set`` overrides) and checks.

A config is a nested mapping with the sections of :data:`SCHEMA` (:mod:`.schema`: keys,
defaults, what each value must be).  :func:`load_config` (:mod:`.loading`) merges a file (or
mapping) over the defaults, applies overrides, rejects unknown keys and checks every value and
the sections against each other (:mod:`.checks`), raising one :class:`ConfigError` that names
the field.  Nothing here is expensive and importing it is light: the resolved problem (model,
initial density, output times, ...) is built, and what only building can check is checked,
by :class:`meanfield.problem.Problem`, once per run.
"""

from .checks import check_mask, check_model, check_schedule_end, check_times
from .loading import Config, load_config, parse_override
from .schema import (
    CORE_CELLS,
    DEFAULT_CONFIG,
    DEFAULT_INITIAL,
    DEFAULT_NAME,
    DEFAULT_OUTPUTS,
    DEFAULT_SLICES,
    KAPPA_MAX,
    MAX_OUTPUTS,
    MAX_STEPS,
    NAME_PATTERN,
    OUTPUT_KEYS,
    SAMPLER_NAMES,
    SCHEMA,
    ConfigError,
    default_core_cells,
)

__all__ = [
    "CORE_CELLS",
    "DEFAULT_CONFIG",
    "DEFAULT_INITIAL",
    "DEFAULT_NAME",
    "DEFAULT_OUTPUTS",
    "DEFAULT_SLICES",
    "KAPPA_MAX",
    "MAX_OUTPUTS",
    "MAX_STEPS",
    "NAME_PATTERN",
    "OUTPUT_KEYS",
    "SAMPLER_NAMES",
    "SCHEMA",
    "Config",
    "ConfigError",
    "check_mask",
    "check_model",
    "check_schedule_end",
    "check_times",
    "default_core_cells",
    "load_config",
    "parse_override",
]
