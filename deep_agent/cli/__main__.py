from deep_agent.cli._app import main

raise SystemExit(main())
