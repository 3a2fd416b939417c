from processors.access.main import main

main()
