from msprobe_atb.cli import main

raise SystemExit(main())
