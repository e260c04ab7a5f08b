"""Knowledge bases of a session directory (reference section 15): opening, querying, publishing, indexing."""
