"""ragtui: local retrieval you can watch and look into."""

__version__ = "0.1.0"
