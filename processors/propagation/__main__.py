from processors.propagation.main import main

main()
