"""The run directory: its layout, the writer that owns every file of a run, and the reader."""
