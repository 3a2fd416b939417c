from processors.lake.cli import main

main()
