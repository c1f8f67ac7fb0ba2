"""What the user asked for: THE option spec (options), the settings and their layers (config),
the code to build (source), and the one place where they become a RunRequest (resolve).
"""
