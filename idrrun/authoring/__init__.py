"""Course authoring: the teacher's side of the course's files, apart from grading a class.
Working copies of the course and the students' copy (copies.py), the reference values (references.py)."""
