"""Results out: exact data writers, Rich views, colours and pictures."""
