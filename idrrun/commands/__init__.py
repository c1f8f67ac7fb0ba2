"""The terminal commands (`idrrun run|grade|course|doctor`), one module each, imported by
cli.py when they run."""
