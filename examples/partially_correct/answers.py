Q1 = "B"
Q2 = "C"  # wrong: backward does not belong inside autocast
Q3 = "B"
Q4 = "A"
Q5 = "A"  # wrong
