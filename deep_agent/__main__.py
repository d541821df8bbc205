from deep_agent.demo import main

raise SystemExit(main())
