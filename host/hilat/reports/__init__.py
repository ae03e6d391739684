"""Everything a run becomes for a reader: the report document and its renderers, plots, the formats
other tools read, and exports."""
