"""A run against its exercise (checked: the verdict, the solution's output), a whole class of
submissions with its reports (classroom), and the course's own check (course).
"""
