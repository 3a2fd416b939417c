from connectors.main import main

main()
