"""Operations tools for the Harbor API."""
