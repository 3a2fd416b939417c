from processors.enrichment.main import main

main()
