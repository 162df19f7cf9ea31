"""The modules of perf/compare/compare.py: common (rows, formats), measure, spells, bounds,
tables, report."""
