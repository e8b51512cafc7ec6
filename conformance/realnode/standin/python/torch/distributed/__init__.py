# Stand-in (see torch/__init__.py).
