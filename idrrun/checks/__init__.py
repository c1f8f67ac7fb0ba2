"""Exercise specs (specs), the check kinds evaluated on what a run produced (kinds), and the
OpenACC directives of a source (directives). Pure: no processes are started here.
"""
