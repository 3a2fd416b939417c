from processors.lake.main import main

main()
