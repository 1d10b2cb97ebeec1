"""The agent's world: a fictional encyclopedia, a WebGPT-style text browser over it, tasks
with known answers, and the rubric that scores finished episodes. Plain Python, no Django.
"""
