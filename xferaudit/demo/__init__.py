"""The bundled example of ``xferaudit demo``: ``train_plain.py`` (before
``xferaudit wrap``) and ``train.py`` (after). Shipped inside the package so the
demo works after a plain ``pip install``."""
