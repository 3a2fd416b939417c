from processors.outbound.main import main

main()
