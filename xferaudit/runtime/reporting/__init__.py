"""The report and its files: the after-step table and the run file.

``Report`` (``_report``), its rows as JSON (``report_rows``), the JSON
reader and writer that keep the file format (``report_json``), and the
terminal-safe text of names (``printable``). Reads the counted path's tallies;
imports neither the guard nor runs.
"""
