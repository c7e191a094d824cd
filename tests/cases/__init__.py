"""A labelled diagnosis suite: scripted scenarios with the findings they must and must not raise."""
