from gputop_doctor.cli import main

raise SystemExit(main())
