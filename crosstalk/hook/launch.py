"""The hook as the installers write it into client configs: ``python -I -S <this file>``.

A client runs the hook at every event of every session, so its start-up is paid over and over.
``-S`` skips ``site``: no site-packages scan, no ``.pth`` files, which is a third of a bare
interpreter's start on a typical install (``launcher_prompt`` in ``bench/hook.py``). ``-I`` keeps
the user's ``PYTHON*`` variables and this file's own directory off the path. The hook needs only
the standard library and this package, so the package's parent directory is all this file puts
on ``sys.path``. The ``crosstalk-hook`` console script runs the same ``main``.
"""

import sys

if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 3)[0])  # .../<parent>/crosstalk/hook/launch.py
    from crosstalk.hook.main import main

    main()
