from deep_agent.cli.app import main

raise SystemExit(main())
