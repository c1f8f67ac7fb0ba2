"""A whole class of submissions: discovered (discover), graded in rooms of their own under the
grader's policy (grader, with its session), reported (report, rows, stats, board, feedback,
gradebook), and exchanged (exchange, receiver, exchange_client, handout); the course's own
check (course, ladder).
"""
